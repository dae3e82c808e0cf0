# The limits of the names and counts below are those of ../limits.json (the spec's validation
# reads that file; tests/unit/test_fleet_limits.py holds these literals equal to it). With the
# longest campaign, vantage and region, the IAM role name dnscamp-<campaign>-<vantage>-<region>
# is exactly AWS's 64 characters.
variable "campaign" {
  description = "Campaign id (the spec's campaign.name): tags, IAM names and the results/<campaign>/ prefix."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_-]*$", var.campaign)) && length(var.campaign) <= 20
    error_message = "campaign must be 1-20 characters of a-z, 0-9, '_' or '-', starting with a letter or digit."
  }
}

variable "vantage" {
  description = "Vantage id from the spec: tags, IAM names and the results/<campaign>/<vantage>/ prefix."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_-]*$", var.vantage)) && length(var.vantage) <= 20
    error_message = "vantage must be 1-20 characters of a-z, 0-9, '_' or '-', starting with a letter or digit."
  }
}

variable "region" {
  description = "AWS region of the provider passed in (tags and IAM names; the provider decides where)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-gov)?-[a-z]+-[0-9]$", var.region)) && length(var.region) <= 14
    error_message = "region must be an AWS region name such as us-east-2 (at most 14 characters)."
  }
}

variable "network_profile" {
  description = "Network profile applied on the instance (netem when the kernel has sch_netem, else linkem); null: the bare link."
  type        = string
  default     = null

  validation {
    condition     = var.network_profile == null || can(regex("^[A-Za-z0-9_.-]+$", var.network_profile))
    error_message = "network_profile must be a profile name (letters, digits, '_', '.', '-')."
  }
}

variable "instance_type" {
  description = "EC2 instance type of the vantage's agents."
  type        = string
  default     = "t3.medium"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*[0-9][a-z0-9-]*\\.[a-z0-9]+$", var.instance_type))
    error_message = "instance_type must look like an EC2 instance type, e.g. t3.medium."
  }
}

variable "instance_count" {
  description = "Number of identical agent instances for this (vantage, region)."
  type        = number
  default     = 1

  validation {
    condition     = var.instance_count >= 1 && var.instance_count <= 20 && floor(var.instance_count) == var.instance_count
    error_message = "instance_count must be a whole number from 1 to 20."
  }
}

variable "results_bucket" {
  description = "Name of the results bucket (results_bucket module's output `bucket`); the instance may only PutObject into it."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.results_bucket)) && !strcontains(var.results_bucket, "..")
    error_message = "results_bucket must be an S3 bucket name: 3-63 characters of a-z, 0-9, '.', '-', a letter or digit at each end, no '..'."
  }

  validation {
    condition     = !can(regex("^\\d+\\.\\d+\\.\\d+\\.\\d+$", var.results_bucket))
    error_message = "results_bucket must not be shaped like an IP address."
  }

  validation {
    condition     = alltrue([for p in ["xn--", "sthree-", "amzn-s3-demo-"] : !startswith(var.results_bucket, p)])
    error_message = "results_bucket must not start with a prefix S3 reserves (xn--, sthree-, amzn-s3-demo-)."
  }

  validation {
    condition     = alltrue([for s in ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"] : !endswith(var.results_bucket, s)])
    error_message = "results_bucket must not end with a suffix S3 reserves (-s3alias, --ol-s3, .mrap, --x-s3, --table-s3)."
  }
}

variable "ssh_cidr" {
  description = "Operator CIDR allowed to SSH (tcp/22) to the instances; null: no ingress at all."
  type        = string
  default     = null

  validation {
    condition     = var.ssh_cidr == null || (can(cidrhost(var.ssh_cidr, 0)) && !contains(["0.0.0.0/0", "::/0"], coalesce(var.ssh_cidr, "-")))
    error_message = "ssh_cidr must be a CIDR block narrower than the whole Internet (e.g. 203.0.113.7/32), or null."
  }
}

variable "ami_id" {
  description = "AMI of the instances; null: the newest official Debian 12 amd64 image (owner 136693071363)."
  type        = string
  default     = null

  validation {
    condition     = var.ami_id == null || can(regex("^ami-[0-9a-f]{8,17}$", var.ami_id))
    error_message = "ami_id must be an AMI id (ami-...) or null."
  }
}

variable "spec_toml" {
  description = "The campaign spec text, written to /etc/dnscamp/campaign.toml on the instance."
  type        = string

  validation {
    condition     = length(trimspace(var.spec_toml)) > 0
    error_message = "spec_toml must not be empty."
  }
}

# The wheel and its lock file arrive by presigned HTTPS GET URLs (made by `dnscamp fleet apply`) and
# are checked by sha256, so the instance role needs no S3 read right. The URLs are pasted into a
# shell script between single quotes: the validation below keeps quotes and whitespace out.
variable "agent_wheel_url" {
  description = "Presigned HTTPS GET URL of the agent wheel under dist/ of the results bucket."
  type        = string

  validation {
    condition     = can(regex("^https://[^\\s'\"\\\\]+$", var.agent_wheel_url))
    error_message = "agent_wheel_url must be an https:// URL without whitespace, quotes or backslashes."
  }
}

variable "agent_wheel_sha256" {
  description = "sha256 (hex) of the agent wheel; the instance refuses a wheel that does not match."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.agent_wheel_sha256))
    error_message = "agent_wheel_sha256 must be 64 lower-case hex digits."
  }
}

variable "agent_lock_url" {
  description = "Presigned HTTPS GET URL of requirements.lock (pip --require-hashes) under dist/."
  type        = string

  validation {
    condition     = can(regex("^https://[^\\s'\"\\\\]+$", var.agent_lock_url))
    error_message = "agent_lock_url must be an https:// URL without whitespace, quotes or backslashes."
  }
}

variable "agent_lock_sha256" {
  description = "sha256 (hex) of the lock file."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.agent_lock_sha256))
    error_message = "agent_lock_sha256 must be 64 lower-case hex digits."
  }
}

variable "agent_version" {
  description = "Version of the dnscamp wheel (its file name is dnscamp-<version>-py3-none-any.whl)."
  type        = string

  validation {
    condition     = can(regex("^[0-9A-Za-z.+_-]+$", var.agent_version))
    error_message = "agent_version must be a PEP 440 version string."
  }
}

variable "apt_packages" {
  description = "Debian packages of the agent (browsers, drivers, DNS tools) installed before the wheel."
  type        = list(string)
  default = [
    "build-essential", "pkg-config", "python3-dev", "libgetdns-dev", "libcurl4-openssl-dev", "libssl-dev",
    "chromium", "chromium-driver", "firefox-esr", "stubby", "libnss3-tools", "knot-dnsutils",
  ]

  validation {
    condition     = alltrue([for p in var.apt_packages : can(regex("^[a-z0-9][a-z0-9+.-]+$", p))])
    error_message = "apt_packages must be Debian package names."
  }
}
