variable "bucket_name" {
  description = "Name of the results bucket (globally unique)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket_name)) && !strcontains(var.bucket_name, "..")
    error_message = "bucket_name must be an S3 bucket name: 3-63 characters of a-z, 0-9, '.', '-', a letter or digit at each end, no '..'."
  }

  validation {
    condition     = !can(regex("^\\d+\\.\\d+\\.\\d+\\.\\d+$", var.bucket_name))
    error_message = "bucket_name must not be shaped like an IP address."
  }

  validation {
    condition     = alltrue([for p in ["xn--", "sthree-", "amzn-s3-demo-"] : !startswith(var.bucket_name, p)])
    error_message = "bucket_name must not start with a prefix S3 reserves (xn--, sthree-, amzn-s3-demo-)."
  }

  validation {
    condition     = alltrue([for s in ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"] : !endswith(var.bucket_name, s)])
    error_message = "bucket_name must not end with a suffix S3 reserves (-s3alias, --ol-s3, .mrap, --x-s3, --table-s3)."
  }
}

variable "transition_days" {
  description = "Days after which current objects move to transition_storage_class."
  type        = number
  default     = 30

  validation {
    condition     = var.transition_days >= 1 && floor(var.transition_days) == var.transition_days
    error_message = "transition_days must be a whole number >= 1."
  }
}

variable "transition_storage_class" {
  description = "The colder storage class objects move to after transition_days."
  type        = string
  default     = "GLACIER_IR"

  validation {
    condition     = contains(["STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE"], var.transition_storage_class)
    error_message = "transition_storage_class must be one of STANDARD_IA, ONEZONE_IA, INTELLIGENT_TIERING, GLACIER_IR, GLACIER, DEEP_ARCHIVE."
  }
}

variable "force_destroy" {
  description = "Let `destroy` delete a bucket that still holds objects (results are lost): for throwaway campaigns and tests."
  type        = bool
  default     = false
}

variable "noncurrent_expiration_days" {
  description = "Days after which a noncurrent (overwritten or deleted) object version is removed (dnscamp.fleet.cost bills the same days)."
  type        = number
  default     = 30

  validation {
    condition     = var.noncurrent_expiration_days >= 1 && floor(var.noncurrent_expiration_days) == var.noncurrent_expiration_days
    error_message = "noncurrent_expiration_days must be a whole number >= 1."
  }
}
