# The authoritative server of the whoami zone for live resolver discovery (001's QuicSocks method):
# every name below the zone is answered with the address of the asking resolver and logged to
# /var/log/dnscamp/whoami.log, with the same CoreDNS config as the testbed's whoami server.

locals {
  name = "dnscamp-whoami-${replace(var.zone, ".", "-")}"
  tags = merge(var.tags, { role = "whoami-dns", zone = var.zone })
  corefile = var.corefile != null ? var.corefile : templatefile("${path.module}/Corefile.tftpl", {
    zone       = var.zone
    zone_re    = replace(var.zone, ".", "[.]")
    ns_address = aws_eip.dns.public_ip # known before the instance: the glue and the answer agree
  })
  user_data = templatefile("${path.module}/user_data.yaml.tftpl", {
    corefile       = local.corefile
    coredns_url    = var.coredns_url
    coredns_sha256 = var.coredns_sha256
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
}

data "aws_vpc" "default" {
  default = true
}

resource "aws_security_group" "dns" {
  name        = local.name
  description = "dnscamp whoami DNS: udp/tcp 53 from any resolver, SSH from the operator when asked"
  vpc_id      = data.aws_vpc.default.id
  tags        = merge(local.tags, { Name = local.name })
}

resource "aws_vpc_security_group_ingress_rule" "dns" {
  for_each          = toset(["udp", "tcp"])
  security_group_id = aws_security_group.dns.id
  description       = "DNS (${each.key}) from any resolver in the world: they are what discovery finds"
  ip_protocol       = each.key
  from_port         = 53
  to_port           = 53
  cidr_ipv4         = "0.0.0.0/0"
  tags              = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "ssh" {
  count             = var.ssh_cidr == null ? 0 : 1
  security_group_id = aws_security_group.dns.id
  description       = "SSH from the operator's CIDR only"
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_ipv4         = var.ssh_cidr
  tags              = local.tags
}

# The server answers queries; it only opens connections itself for apt and the binary download.
resource "aws_vpc_security_group_egress_rule" "https" {
  for_each          = toset(["80", "443"])
  security_group_id = aws_security_group.dns.id
  description       = "apt mirrors and the presigned CoreDNS download (tcp/${each.key})"
  ip_protocol       = "tcp"
  from_port         = tonumber(each.key)
  to_port           = tonumber(each.key)
  cidr_ipv4         = "0.0.0.0/0"
  tags              = local.tags
}

resource "aws_eip" "dns" {
  domain = "vpc"
  tags   = merge(local.tags, { Name = local.name })
}

resource "aws_instance" "dns" {
  #checkov:skip=CKV_AWS_88:an authoritative DNS server must be reachable from resolvers anywhere (its elastic IP is the zone's glue)
  #checkov:skip=CKV_AWS_126:detailed (1-minute) monitoring costs per instance; the query log is what matters
  #checkov:skip=CKV2_AWS_41:the server calls no AWS API: an instance role would only widen what a compromised DNS server reaches
  ami                         = coalesce(var.ami_id, one(data.aws_ami.debian12[*].id))
  instance_type               = var.instance_type
  vpc_security_group_ids      = [aws_security_group.dns.id]
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
    volume_size           = 8
    delete_on_termination = true
    tags                  = local.tags
  }

  tags = merge(local.tags, { Name = local.name })

  # User data carries presigned URLs that change on every `dnscamp fleet apply`; it only acts at
  # first boot, so a change must not replace a running agent mid-campaign. A deliberate
  # redeploy is `terraform apply -replace=...` (docs/fleet.md).
  lifecycle {
    ignore_changes = [ami, user_data] # a newer Debian image must not replace the running server
  }
}

resource "aws_eip_association" "dns" {
  allocation_id = aws_eip.dns.id
  instance_id   = aws_instance.dns.id
}
