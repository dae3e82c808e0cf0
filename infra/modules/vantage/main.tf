# One (campaign, vantage, region): instance_count Debian 12 agents in the region's default VPC,
# an egress-only security group (no inbound port unless ssh_cidr is set), and an instance role
# that can only drop results and status objects into the bucket and be reached through SSM
# Session Manager.

locals {
  name = "dnscamp-${var.campaign}-${var.vantage}-${var.region}" # IAM is global: unique per module instance
  tags = {
    campaign        = var.campaign
    vantage         = var.vantage
    region          = var.region
    network_profile = coalesce(var.network_profile, "none")
  }
  ami_id = coalesce(var.ami_id, one(data.aws_ami.debian12[*].id))

  # What the instance may write: its results and run manifests, and the status objects of its
  # own (campaign, vantage, region), one per instance id beneath it, nothing else.
  put_object_arns = [
    "arn:${data.aws_partition.current.partition}:s3:::${var.results_bucket}/results/${var.campaign}/${var.vantage}/*",
    "arn:${data.aws_partition.current.partition}:s3:::${var.results_bucket}/status/${var.campaign}/${var.vantage}/${var.region}/*",
  ]

  user_data = templatefile("${path.module}/user_data.yaml.tftpl", {
    campaign           = var.campaign
    vantage            = var.vantage
    region             = var.region
    network_profile    = var.network_profile == null ? "" : var.network_profile
    results_bucket     = var.results_bucket
    spec_toml          = var.spec_toml
    agent_wheel_url    = var.agent_wheel_url
    agent_wheel_sha256 = var.agent_wheel_sha256
    agent_lock_url     = var.agent_lock_url
    agent_lock_sha256  = var.agent_lock_sha256
    agent_version      = var.agent_version
    put_status_py      = file("${path.module}/put_status.py") # the bootstrap's status PUT, embedded byte for byte
    # what the bootstrap itself runs (venv, downloads, cron, tc) comes first, then the agent's own
    apt_packages = distinct(concat(["python3", "python3-venv", "curl", "ca-certificates", "cron", "iproute2", "kmod"], var.apt_packages))
  })
}

data "aws_ami" "debian12" {
  count       = var.ami_id == null ? 1 : 0
  most_recent = true
  owners      = ["136693071363"] # Debian's official AWS account

  filter {
    name   = "name"
    values = ["debian-12-amd64-*"]
  }

  filter {
    name   = "architecture"
    values = ["x86_64"]
  }

  filter {
    name   = "virtualization-type"
    values = ["hvm"]
  }
}

data "aws_partition" "current" {}

data "aws_vpc" "default" {
  default = true
}

resource "aws_security_group" "agent" {
  name        = local.name
  description = "dnscamp agent ${var.campaign}/${var.vantage}: egress only, SSH from the operator when asked"
  vpc_id      = data.aws_vpc.default.id
  tags        = merge(local.tags, { Name = local.name })
}

resource "aws_vpc_security_group_egress_rule" "all" {
  #checkov:skip=CKV_AWS_382:the agent measures the open Internet: DNS over UDP/TCP 53, 443, 853, QUIC, page loads to any port and ICMP pings to any address
  security_group_id = aws_security_group.agent.id
  description       = "measurements reach any resolver, web server or ping target"
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"
  tags              = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "ssh" {
  count             = var.ssh_cidr == null ? 0 : 1
  security_group_id = aws_security_group.agent.id
  description       = "SSH from the operator's CIDR only"
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_ipv4         = var.ssh_cidr
  tags              = local.tags
}

resource "aws_iam_role" "agent" {
  name = local.name
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Action    = "sts:AssumeRole"
      Principal = { Service = "ec2.amazonaws.com" }
    }]
  })
  tags = local.tags
}

resource "aws_iam_role_policy" "put_results" {
  name = "put-results"
  role = aws_iam_role.agent.id
  # jsonencode rather than a policy-document data source: the tests read the real JSON under a mock provider
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid      = "PutResultsAndStatusOnly"
      Effect   = "Allow"
      Action   = ["s3:PutObject"]
      Resource = local.put_object_arns
    }]
  })
}

# Operator access without an open port or a key pair: SSM Session Manager (`dnscamp fleet ssh`
# prints the `aws ssm start-session` line). Debian's AMIs ship the SSM agent.
resource "aws_iam_role_policy_attachment" "ssm" {
  role       = aws_iam_role.agent.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "agent" {
  name = local.name
  role = aws_iam_role.agent.name
  tags = local.tags
}

resource "aws_instance" "agent" {
  #checkov:skip=CKV_AWS_88:agents run in the default VPC's public subnets and need a public address to measure the Internet (no NAT gateway, which would add latency and cost)
  #checkov:skip=CKV_AWS_126:detailed (1-minute) monitoring costs per instance and the agent reports its own status object
  count                       = var.instance_count
  ami                         = local.ami_id
  instance_type               = var.instance_type
  iam_instance_profile        = aws_iam_instance_profile.agent.name
  vpc_security_group_ids      = [aws_security_group.agent.id]
  associate_public_ip_address = true
  ebs_optimized               = true
  user_data                   = local.user_data

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required" # IMDSv2 only
    http_put_response_hop_limit = 1
  }

  root_block_device {
    encrypted             = true
    volume_type           = "gp3"
    volume_size           = 16
    delete_on_termination = true
    tags                  = local.tags
  }

  tags = merge(local.tags, { Name = "${local.name}-${count.index}" })

  # User data carries presigned URLs that change on every `dnscamp fleet apply` and the AMI
  # lookup follows Debian's newest image: neither may replace a running agent (and its spool)
  # mid-campaign, so both count only at creation. A deliberate redeploy is `dnscamp fleet apply
  # --allow-replace` after `terraform apply -replace=...` (docs/fleet.md).
  lifecycle {
    ignore_changes = [ami, user_data]
  }
}
