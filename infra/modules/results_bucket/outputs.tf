output "bucket" {
  description = "Name of the results bucket."
  value       = aws_s3_bucket.results.bucket
}

output "arn" {
  description = "ARN of the results bucket."
  value       = aws_s3_bucket.results.arn
}
