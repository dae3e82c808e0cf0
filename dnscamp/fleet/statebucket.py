"""The bucket of a fleet's Terraform state ([fleet] state_bucket), created by `dnscamp fleet init`
before Terraform can use it: versioned (an overwritten state can be restored), encrypted by
default, public access blocked, and TLS only. Terraform's lock file lives beside the state in it."""

from __future__ import annotations

import json


def _exists(s3, name: str) -> bool:
    import botocore.exceptions

    try:
        s3.head_bucket(Bucket=name)
        return True
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchBucket", "NotFound"):
            return False
        raise  # 403: someone else's bucket (names are global), or no right: say so, do not guess


def ensure(s3, name: str, region: str) -> bool:
    """Create the state bucket when missing and (re)apply its settings; True when it was created."""
    created = not _exists(s3, name)
    if created:
        kw = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        s3.create_bucket(Bucket=name, **kw)
    s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    s3.put_bucket_policy(Bucket=name, Policy=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
                       "Resource": [f"arn:aws:s3:::{name}", f"arn:aws:s3:::{name}/*"],
                       "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}))
    return created
