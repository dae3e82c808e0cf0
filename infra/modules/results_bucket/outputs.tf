output "bucket" {
  description = "Name of the results bucket."
  value       = aws_s3_bucket.results.bucket
}

output "arn" {
  description = "ARN of the results bucket."
  value       = aws_s3_bucket.results.arn
}

output "collector_policy_arn" {
  description = "ARN of the collector's policy (list and read results/ only): attach it to the collector's user or role."
  value       = aws_iam_policy.collector.arn
}
