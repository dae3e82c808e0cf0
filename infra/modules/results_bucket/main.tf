# The campaign's results bucket: agents PutObject results/<campaign>/<vantage>/... (records,
# run manifests) and status/<campaign>/<vantage>/<region>/<instance-id>.json into it; `fleet
# apply` uploads dist/ (wheel, lock); nothing is public.

resource "aws_s3_bucket" "results" {
  #checkov:skip=CKV_AWS_18:server access logs need a second bucket per campaign; CloudTrail data events cover audits when wanted
  #checkov:skip=CKV_AWS_144:cross-region replication doubles storage for measurement data that can be re-run
  #checkov:skip=CKV2_AWS_62:nothing consumes event notifications: `fleet status` and ingest list the prefixes
  #checkov:skip=CKV_AWS_145:SSE-S3 (AES-256) instead of KMS: agents need no kms:GenerateDataKey right and there is no per-request KMS charge; the data is measurements, not secrets
  bucket        = var.bucket_name
  force_destroy = var.force_destroy
}

resource "aws_s3_bucket_ownership_controls" "results" {
  bucket = aws_s3_bucket.results.id
  rule {
    object_ownership = "BucketOwnerEnforced" # ACLs off: the bucket policy and IAM decide alone
  }
}

resource "aws_s3_bucket_public_access_block" "results" {
  bucket                  = aws_s3_bucket.results.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_versioning" "results" {
  bucket = aws_s3_bucket.results.id
  versioning_configuration {
    status = "Enabled" # an agent overwriting a result by mistake leaves the old version
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "results" {
  bucket = aws_s3_bucket.results.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "results" {
  bucket = aws_s3_bucket.results.id

  rule {
    id     = "colder-after-${var.transition_days}-days"
    status = "Enabled"
    filter {} # the whole bucket

    transition {
      days          = var.transition_days
      storage_class = var.transition_storage_class
    }

    # an overwritten status object (every firing) or a re-shipped unit leaves a noncurrent
    # version: kept long enough to undo a mistake, then it stops costing storage. Not moved to
    # the colder class first: those bodies are a few KiB, under its 128 KiB minimum billable size.
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_expiration_days
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }

  depends_on = [aws_s3_bucket_versioning.results]

}

resource "aws_s3_bucket_policy" "tls_only" {
  bucket = aws_s3_bucket.results.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "DenyInsecureTransport"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [aws_s3_bucket.results.arn, "${aws_s3_bucket.results.arn}/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })

  # a policy put before the public access block exists can be refused as "public" by S3
  depends_on = [aws_s3_bucket_public_access_block.results]
}

# The collector's identity: read the results prefix and nothing else (no status/, no dist/, no
# write, no delete). A managed policy without principals: attach it to the collector's user or
# role (`aws iam attach-user-policy`, docs/pipeline.md "The collector"); its keys never pass
# through Terraform, so they are never in the state.
resource "aws_iam_policy" "collector" {
  name        = "dnscamp-collector-${var.bucket_name}"
  description = "dnscamp collect: list and read results/ of ${var.bucket_name}, nothing else"
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "ListResultsOnly"
        Effect    = "Allow"
        Action    = "s3:ListBucket"
        Resource  = aws_s3_bucket.results.arn
        Condition = { StringLike = { "s3:prefix" = ["results/", "results/*"] } }
      },
      {
        Sid      = "ReadResultsOnly"
        Effect   = "Allow"
        Action   = "s3:GetObject"
        Resource = "${aws_s3_bucket.results.arn}/results/*"
      },
    ]
  })
}
