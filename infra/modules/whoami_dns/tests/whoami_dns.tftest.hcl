# The whoami DNS server under a mock AWS provider (no credentials, nothing created).

mock_provider "aws" {
  override_data {
    target = data.aws_ami.debian12
    values = { id = "ami-0d3bde5b0dd4ed1f5" }
  }
  override_resource {
    target = aws_eip.dns
    values = { public_ip = "198.51.100.53" }
  }
}

variables {
  zone           = "whoami.dnscamp.example.org"
  coredns_url    = "https://dnscamp-results-www20.s3.amazonaws.com/dist/coredns-1.15.0?X-Amz-Signature=abc"
  coredns_sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  tags           = { campaign = "www20" }
}

run "defaults" {
  command = apply

  assert {
    condition     = aws_instance.dns.instance_type == "t3.micro" && aws_instance.dns.ami == "ami-0d3bde5b0dd4ed1f5"
    error_message = "a small Debian 12 instance"
  }
  assert {
    condition     = aws_instance.dns.metadata_options[0].http_tokens == "required" && aws_instance.dns.root_block_device[0].encrypted
    error_message = "IMDSv2 required and an encrypted root volume"
  }
  assert {
    condition     = aws_instance.dns.tags["campaign"] == "www20" && aws_instance.dns.tags["zone"] == var.zone
    error_message = "tagged with the campaign and the zone"
  }
  assert {
    condition     = toset([for r in aws_vpc_security_group_ingress_rule.dns : "${r.ip_protocol}/${r.from_port}-${r.to_port}"]) == toset(["udp/53-53", "tcp/53-53"]) && length(aws_vpc_security_group_ingress_rule.ssh) == 0
    error_message = "DNS is the only ingress without ssh_cidr"
  }
  assert {
    condition     = toset([for r in aws_vpc_security_group_egress_rule.https : "${r.ip_protocol}/${r.from_port}"]) == toset(["tcp/80", "tcp/443"])
    error_message = "egress only to http(s) for apt and the download"
  }
  assert {
    condition     = aws_eip_association.dns.instance_id == aws_instance.dns.id && output.public_ip == "198.51.100.53"
    error_message = "the elastic IP is the server's address"
  }
  assert {
    condition = alltrue([for s in [
      "whoami.dnscamp.example.org. {",
      "match \"^ns[.]whoami[.]dnscamp[.]example[.]org[.]$\"",
      "answer \"{{ .Name }} 3600 IN A 198.51.100.53\"",
      "answer \"{{ .Name }} 0 IN A {{ .Remote }}\"",
    ] : strcontains(output.corefile, s)]) && !strcontains(output.corefile, "bind ")
    error_message = "the testbed's whoami config for the zone, listening on every address, ns.<zone> at the elastic IP"
  }
  assert {
    condition = alltrue([for s in [
      "#cloud-config\n",
      base64encode(output.corefile),
      "${var.coredns_sha256}  /usr/local/bin/coredns.download",
      "'${var.coredns_url}' && sha256sum --check --strict /etc/dnscamp/coredns.sha256 && install",
    ] : strcontains(aws_instance.dns.user_data, s)])
    error_message = "the user data writes the Corefile and installs CoreDNS only after its sha256 check"
  }
}

run "own_corefile_and_ssh" {
  command = plan
  variables {
    corefile = ". {\n  whoami\n}\n"
    ssh_cidr = "203.0.113.0/24"
  }
  assert {
    condition     = output.corefile == ". {\n  whoami\n}\n" && aws_vpc_security_group_ingress_rule.ssh[0].cidr_ipv4 == "203.0.113.0/24"
    error_message = "a given Corefile is used as is; SSH from ssh_cidr"
  }
}

run "zone_without_trailing_dot" {
  command = plan
  variables {
    zone = "whoami.example.org."
  }
  expect_failures = [var.zone]
}
