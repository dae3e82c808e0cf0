"""boto3 for `dnscamp fleet`: clients from the standard credential chain (``--profile``,
environment, SSO, instance role; nothing is read, stored or printed here), the fleet's
instances by tag, and each vantage's last upload in the results bucket (status objects:
dnscamp.fleet.status)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from dnscamp.errors import UsageError
from dnscamp.spec import CampaignSpec


class AwsError(UsageError):
    """An AWS call failed or no credentials were found (one line, no secrets)."""


def session(profile: str | None = None):
    import boto3
    import botocore.exceptions

    try:
        return boto3.Session(profile_name=profile)
    except botocore.exceptions.ProfileNotFound as exc:
        raise AwsError(f"--profile: {exc}") from None


def client(sess, service: str, region: str, endpoint_url: str | None = None):
    return sess.client(service, region_name=region, endpoint_url=endpoint_url)


def one_line(exc: Exception) -> str:
    """botocore's message (the service's error code and text; never request headers)."""
    return " ".join(str(exc).split())[:300]


@dataclass(frozen=True)
class Instance:
    region: str
    id: str
    state: str
    type: str
    vantage: str
    launched: datetime | None
    public_ip: str | None
    tags: dict[str, str]


def instances(sess, spec: CampaignSpec, regions: list[str], endpoint_url: str | None = None) -> list[Instance]:
    """Instances tagged campaign=<name> in every region of the fleet (terminated ones included:
    they show what `destroy` did until AWS forgets them)."""
    out: list[Instance] = []
    for region in regions:
        ec2 = client(sess, "ec2", region, endpoint_url)
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "tag:campaign", "Values": [spec.campaign.name]}])
        for page in pages:
            for r in page["Reservations"]:
                for i in r["Instances"]:
                    tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
                    out.append(Instance(region=region, id=i["InstanceId"], state=i["State"]["Name"],
                                        type=i.get("InstanceType", "?"), vantage=tags.get("vantage", tags.get("role", "?")),
                                        launched=i.get("LaunchTime"), public_ip=i.get("PublicIpAddress"), tags=tags))
    return out


def last_upload(s3, bucket: str, campaign: str, vantage: str) -> tuple[str, datetime] | None:
    """The newest object under results/<campaign>/<vantage>/ (key, time), or None."""
    newest: tuple[str, datetime] | None = None
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"results/{campaign}/{vantage}/"):
        for o in page.get("Contents", []):
            if newest is None or o["LastModified"] > newest[1]:
                newest = (o["Key"], o["LastModified"])
    return newest


def empty_bucket(s3, bucket: str) -> int:
    """Delete every object version and delete marker (a versioned bucket is empty only then)."""
    n = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        batch = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
        for i in range(0, len(batch), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": batch[i:i + 1000], "Quiet": True})
            n += len(batch[i:i + 1000])
    return n
