# The vantage module's logic under a mock AWS provider (no credentials, nothing created).

mock_provider "aws" {
  override_data {
    target = data.aws_ami.debian12
    values = { id = "ami-0d3bde5b0dd4ed1f5" }
  }
  override_data {
    target = data.aws_vpc.default
    values = { id = "vpc-0a1b2c3d" }
  }
  override_data {
    target = data.aws_partition.current
    values = { partition = "aws" }
  }
}

variables {
  campaign           = "www20"
  vantage            = "ec2-ohio"
  region             = "us-east-2"
  network_profile    = "4g"
  results_bucket     = "dnscamp-results-www20"
  spec_toml          = "[campaign]\nid = \"www20\"\n"
  agent_wheel_url    = "https://dnscamp-results-www20.s3.amazonaws.com/dist/dnscamp-0.1.0-py3-none-any.whl?X-Amz-Signature=abc&X-Amz-Expires=3600"
  agent_wheel_sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  agent_lock_url     = "https://dnscamp-results-www20.s3.amazonaws.com/dist/requirements.lock?X-Amz-Signature=def"
  agent_lock_sha256  = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
  agent_version      = "0.1.0"
}

run "defaults" {
  command = apply

  assert {
    condition     = length(aws_instance.agent) == 1
    error_message = "one instance by default"
  }
  assert {
    condition     = aws_instance.agent[0].ami == "ami-0d3bde5b0dd4ed1f5" && aws_instance.agent[0].instance_type == "t3.medium"
    error_message = "the Debian 12 AMI from the data source and the default instance type"
  }
  assert {
    condition     = one(data.aws_ami.debian12[0].owners) == "136693071363"
    error_message = "the AMI comes from Debian's official account"
  }
  assert {
    condition     = aws_instance.agent[0].metadata_options[0].http_tokens == "required"
    error_message = "IMDSv2 is required"
  }
  assert {
    condition     = aws_instance.agent[0].root_block_device[0].encrypted == true
    error_message = "the root volume is encrypted"
  }
  assert {
    condition = { for k in ["campaign", "vantage", "region", "network_profile"] : k => aws_instance.agent[0].tags[k] } == {
      campaign = "www20", vantage = "ec2-ohio", region = "us-east-2", network_profile = "4g"
    }
    error_message = "instances carry the campaign, vantage, region and network_profile tags"
  }
  assert {
    condition     = aws_security_group.agent.tags["vantage"] == "ec2-ohio" && aws_iam_role.agent.tags["campaign"] == "www20"
    error_message = "the security group and the role are tagged too"
  }
  assert {
    condition     = length(aws_vpc_security_group_ingress_rule.ssh) == 0
    error_message = "no ingress at all without ssh_cidr"
  }
  assert {
    condition     = aws_vpc_security_group_egress_rule.all.ip_protocol == "-1" && aws_vpc_security_group_egress_rule.all.security_group_id == aws_security_group.agent.id
    error_message = "egress to anywhere on the agent's group"
  }
  assert {
    condition     = aws_iam_role.agent.name == "dnscamp-www20-ec2-ohio-us-east-2" && aws_iam_instance_profile.agent.role == aws_iam_role.agent.name
    error_message = "IAM names are unique per (campaign, vantage, region) and the profile carries the role"
  }
  assert {
    condition     = jsondecode(aws_iam_role.agent.assume_role_policy).Statement[0].Principal.Service == "ec2.amazonaws.com"
    error_message = "only EC2 assumes the role"
  }
  assert {
    condition     = length(jsondecode(aws_iam_role_policy.put_results.policy).Statement) == 1
    error_message = "the role has exactly one statement"
  }
  assert {
    condition = (jsondecode(aws_iam_role_policy.put_results.policy).Statement[0].Effect == "Allow"
    && jsondecode(aws_iam_role_policy.put_results.policy).Statement[0].Action == ["s3:PutObject"])
    error_message = "the only S3 right is s3:PutObject (no Get, List or Delete)"
  }
  assert {
    condition = jsondecode(aws_iam_role_policy.put_results.policy).Statement[0].Resource == [
      "arn:aws:s3:::dnscamp-results-www20/results/www20/ec2-ohio/*",
      "arn:aws:s3:::dnscamp-results-www20/status/www20/ec2-ohio/us-east-2/*",
    ]
    error_message = "PutObject only under results/<campaign>/<vantage>/ and status/<campaign>/<vantage>/<region>/"
  }
  assert {
    condition = (aws_iam_role_policy_attachment.ssm.role == aws_iam_role.agent.name
    && aws_iam_role_policy_attachment.ssm.policy_arn == "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore")
    error_message = "the instance role carries what SSM Session Manager needs"
  }
  assert {
    condition     = output.ami_ids == ["ami-0d3bde5b0dd4ed1f5"]
    error_message = "the output names the AMI each instance was created from"
  }
  assert {
    condition     = startswith(aws_instance.agent[0].user_data, "#cloud-config\n") && aws_instance.agent[0].user_data == output.user_data
    error_message = "the instance boots with the rendered cloud-config"
  }
  assert {
    condition     = strcontains(aws_instance.agent[0].user_data, base64gzip(var.spec_toml))
    error_message = "the user data writes the campaign spec"
  }
  assert {
    condition = alltrue([for s in [
      "${var.agent_wheel_sha256}  /var/lib/dnscamp/dist/dnscamp-0.1.0-py3-none-any.whl",
      "${var.agent_lock_sha256}  /var/lib/dnscamp/dist/requirements.lock",
      "sha256sum --check --strict /etc/dnscamp/dist.sha256",
      "'${var.agent_wheel_url}'",
      "'${var.agent_lock_url}'",
      "pip install --quiet --require-hashes -r",
      "pip install --quiet --no-deps",
      "profile='4g'",
      "dnscamp schedule install /etc/dnscamp/campaign.toml",
      "DNSCAMP_RESULTS_BUCKET=dnscamp-results-www20",
    ] : strcontains(aws_instance.agent[0].user_data, s)])
    error_message = "the user data downloads, sha256-checks and installs the wheel and lock, applies the profile and installs the schedule"
  }
}

run "ssh_only_from_the_operator_cidr" {
  command = plan
  variables {
    ssh_cidr = "203.0.113.7/32"
  }
  assert {
    condition     = length(aws_vpc_security_group_ingress_rule.ssh) == 1 && aws_vpc_security_group_ingress_rule.ssh[0].cidr_ipv4 == "203.0.113.7/32"
    error_message = "SSH ingress exactly from ssh_cidr"
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.ssh[0].from_port == 22 && aws_vpc_security_group_ingress_rule.ssh[0].to_port == 22 && aws_vpc_security_group_ingress_rule.ssh[0].ip_protocol == "tcp"
    error_message = "only tcp/22"
  }
}

run "one_instance_per_count_and_a_given_ami" {
  command = plan
  variables {
    instance_count  = 3
    instance_type   = "c6i.large"
    ami_id          = "ami-0123456789abcdef0"
    network_profile = null
  }
  assert {
    condition     = length(aws_instance.agent) == 3 && length(data.aws_ami.debian12) == 0
    error_message = "three instances, and no AMI lookup when ami_id is given"
  }
  assert {
    condition     = alltrue([for i in aws_instance.agent : i.instance_type == "c6i.large" && i.tags["network_profile"] == "none"])
    error_message = "every instance uses the given type; no profile is tagged none"
  }
  assert {
    # the instance created by the run before keeps the image it booted (lifecycle ignore_changes:
    # a newer AMI never replaces a running agent); the new ones use the given AMI
    condition     = aws_instance.agent[0].ami == "ami-0d3bde5b0dd4ed1f5" && aws_instance.agent[1].ami == "ami-0123456789abcdef0" && aws_instance.agent[2].ami == "ami-0123456789abcdef0"
    error_message = "the AMI counts only when an instance is created"
  }
  assert {
    # instances created in this run carry the new user data; a running one keeps what it booted
    # with (lifecycle ignore_changes: user data acts at first boot only)
    condition     = strcontains(output.user_data, "profile=''") && strcontains(aws_instance.agent[2].user_data, "profile=''")
    error_message = "no network profile applied when none is given"
  }
}

run "the_whole_internet_is_not_an_ssh_cidr" {
  command = plan
  variables {
    ssh_cidr = "0.0.0.0/0"
  }
  expect_failures = [var.ssh_cidr]
}

run "a_sha256_must_be_hex" {
  command = plan
  variables {
    agent_wheel_sha256 = "not-a-hash"
  }
  expect_failures = [var.agent_wheel_sha256]
}

run "urls_cannot_break_out_of_the_shell_quotes" {
  command = plan
  variables {
    agent_lock_url = "https://example.org/x'; rm -rf / #"
  }
  expect_failures = [var.agent_lock_url]
}
