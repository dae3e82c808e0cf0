variable "zone" {
  description = "The whoami zone this server is authoritative for (delegate it to ns.<zone> at the public_ip output)."
  type        = string

  validation {
    condition     = can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z]{2,63}$", var.zone)) && length(var.zone) <= 240
    error_message = "zone must be a DNS name in lower case without the trailing dot, at most 240 characters (the security group's name is dnscamp-whoami-<zone>), e.g. whoami.example.org."
  }
}

variable "instance_type" {
  description = "EC2 instance type of the DNS server."
  type        = string
  default     = "t3.micro"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*[0-9][a-z0-9-]*\\.[a-z0-9]+$", var.instance_type))
    error_message = "instance_type must look like an EC2 instance type, e.g. t3.micro."
  }
}

variable "ami_id" {
  description = "AMI of the instance; null: the newest official Debian 12 amd64 image (owner 136693071363)."
  type        = string
  default     = null

  validation {
    condition     = var.ami_id == null || can(regex("^ami-[0-9a-f]{8,17}$", var.ami_id))
    error_message = "ami_id must be an AMI id (ami-...) or null."
  }
}

variable "ssh_cidr" {
  description = "Operator CIDR allowed to SSH (tcp/22); null: DNS is the only ingress."
  type        = string
  default     = null

  validation {
    condition     = var.ssh_cidr == null || (can(cidrhost(var.ssh_cidr, 0)) && !contains(["0.0.0.0/0", "::/0"], coalesce(var.ssh_cidr, "-")))
    error_message = "ssh_cidr must be a CIDR block narrower than the whole Internet (e.g. 203.0.113.7/32), or null."
  }
}

variable "corefile" {
  description = "CoreDNS config; null: the testbed's whoami zone config (Corefile.tftpl, generated from testbed/) rendered for zone and the elastic IP."
  type        = string
  default     = null
}

# Debian 12 has no CoreDNS package and its release downloads are not reachable from every build
# machine, so `dnscamp fleet apply` uploads the binary install/40-testbed-servers.sh built under
# dist/ and passes a presigned URL; the instance checks the sha256 (no S3 right needed).
variable "coredns_url" {
  description = "Presigned HTTPS GET URL of a linux/amd64 CoreDNS binary (>= 1.11: template plugin with .Remote)."
  type        = string

  validation {
    condition     = can(regex("^https://[^\\s'\"\\\\]+$", var.coredns_url))
    error_message = "coredns_url must be an https:// URL without whitespace, quotes or backslashes."
  }
}

variable "coredns_sha256" {
  description = "sha256 (hex) of the CoreDNS binary."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.coredns_sha256))
    error_message = "coredns_sha256 must be 64 lower-case hex digits."
  }
}

variable "tags" {
  description = "Extra tags (e.g. campaign) on every resource."
  type        = map(string)
  default     = {}
}
