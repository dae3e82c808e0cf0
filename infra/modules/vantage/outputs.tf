output "instance_ids" {
  description = "Ids of the vantage's instances (instance_count of them)."
  value       = aws_instance.agent[*].id
}

output "role_name" {
  description = "Name of the instance role (its only S3 right: PutObject under the vantage's prefixes; SSM Session Manager attached)."
  value       = aws_iam_role.agent.name
}

output "role_arn" {
  description = "ARN of the instance role."
  value       = aws_iam_role.agent.arn
}

output "security_group_id" {
  description = "Id of the egress-only security group (plus SSH from ssh_cidr when set)."
  value       = aws_security_group.agent.id
}

output "user_data" {
  description = "The cloud-config every instance of this vantage boots with (tests validate it with cloud-init schema)."
  value       = local.user_data
  sensitive   = true
}

output "ami_ids" {
  description = "The AMI each instance was created from (pinned: a newer image never replaces a running agent)."
  value       = aws_instance.agent[*].ami
}
