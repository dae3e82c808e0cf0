# The results bucket's settings under a mock AWS provider (no credentials, nothing created).

mock_provider "aws" {
  override_resource {
    target = aws_s3_bucket.results
    values = { arn = "arn:aws:s3:::dnscamp-results-www20", id = "dnscamp-results-www20" }
  }
}

variables {
  bucket_name = "dnscamp-results-www20"
}

run "defaults" {
  command = apply

  assert {
    condition     = aws_s3_bucket.results.bucket == "dnscamp-results-www20" && aws_s3_bucket.results.force_destroy == false
    error_message = "the bucket keeps its objects on destroy unless asked"
  }
  assert {
    condition     = one(aws_s3_bucket_versioning.results.versioning_configuration).status == "Enabled"
    error_message = "versioning is on"
  }
  assert {
    condition     = one(one(aws_s3_bucket_server_side_encryption_configuration.results.rule).apply_server_side_encryption_by_default).sse_algorithm == "AES256"
    error_message = "default encryption is on"
  }
  assert {
    condition = alltrue([
      aws_s3_bucket_public_access_block.results.block_public_acls,
      aws_s3_bucket_public_access_block.results.block_public_policy,
      aws_s3_bucket_public_access_block.results.ignore_public_acls,
      aws_s3_bucket_public_access_block.results.restrict_public_buckets,
    ])
    error_message = "all four public access blocks are on"
  }
  assert {
    condition     = one(aws_s3_bucket_ownership_controls.results.rule).object_ownership == "BucketOwnerEnforced"
    error_message = "ACLs are disabled"
  }
  assert {
    condition = jsondecode(aws_s3_bucket_policy.tls_only.policy).Statement == [{
      Sid       = "DenyInsecureTransport"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = ["arn:aws:s3:::dnscamp-results-www20", "arn:aws:s3:::dnscamp-results-www20/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
    error_message = "the bucket policy denies everything over plain HTTP, on the bucket and its objects"
  }
  assert {
    condition     = one(aws_s3_bucket_lifecycle_configuration.results.rule[0].transition).days == 30 && one(aws_s3_bucket_lifecycle_configuration.results.rule[0].transition).storage_class == "GLACIER_IR"
    error_message = "objects move to Glacier Instant Retrieval after 30 days by default"
  }
  assert {
    condition     = aws_s3_bucket_lifecycle_configuration.results.rule[0].status == "Enabled" && one(aws_s3_bucket_lifecycle_configuration.results.rule[0].abort_incomplete_multipart_upload).days_after_initiation == 7
    error_message = "the rule is enabled and cleans up abandoned multipart uploads"
  }
  assert {
    condition     = one(aws_s3_bucket_lifecycle_configuration.results.rule[0].noncurrent_version_expiration).noncurrent_days == 30 && length(aws_s3_bucket_lifecycle_configuration.results.rule[0].noncurrent_version_transition) == 0
    error_message = "noncurrent versions (overwritten status objects, re-shipped units) expire after 30 days, where they are"
  }
  assert {
    condition = jsondecode(aws_iam_policy.collector.policy).Statement == [
      {
        Sid       = "ListResultsOnly"
        Effect    = "Allow"
        Action    = "s3:ListBucket"
        Resource  = "arn:aws:s3:::dnscamp-results-www20"
        Condition = { StringLike = { "s3:prefix" = ["results/", "results/*"] } }
      },
      {
        Sid      = "ReadResultsOnly"
        Effect   = "Allow"
        Action   = "s3:GetObject"
        Resource = "arn:aws:s3:::dnscamp-results-www20/results/*"
      },
    ]
    error_message = "the collector may list and read results/ and nothing else"
  }
  assert {
    condition     = output.bucket == "dnscamp-results-www20" && output.arn == "arn:aws:s3:::dnscamp-results-www20"
    error_message = "outputs name the bucket and its ARN"
  }
}

run "transition_after_n_days" {
  command = plan
  variables {
    transition_days            = 90
    transition_storage_class   = "DEEP_ARCHIVE"
    force_destroy              = true
    noncurrent_expiration_days = 7
  }
  assert {
    condition     = one(aws_s3_bucket_lifecycle_configuration.results.rule[0].transition).days == 90 && one(aws_s3_bucket_lifecycle_configuration.results.rule[0].noncurrent_version_expiration).noncurrent_days == 7
    error_message = "current objects move after transition_days, noncurrent versions go after noncurrent_expiration_days"
  }
  assert {
    condition     = one(aws_s3_bucket_lifecycle_configuration.results.rule[0].transition).storage_class == "DEEP_ARCHIVE" && aws_s3_bucket.results.force_destroy
    error_message = "the storage class and force_destroy are the caller's"
  }
}

run "bad_bucket_name" {
  command = plan
  variables {
    bucket_name = "Results_Bucket"
  }
  expect_failures = [var.bucket_name]
}

run "bad_storage_class" {
  command = plan
  variables {
    transition_storage_class = "COLD"
  }
  expect_failures = [var.transition_storage_class]
}
