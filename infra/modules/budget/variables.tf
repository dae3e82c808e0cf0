variable "campaign" {
  description = "Campaign name: the budget counts the cost of resources tagged campaign=<name>."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$", var.campaign))
    error_message = "campaign must be 1-63 characters of letters, digits, '_', '.' or '-'."
  }
}

variable "amount_usd" {
  description = "Monthly limit in US dollars (the spec's budget_usd_per_month, or the fleet's bill x 1.2)."
  type        = number

  validation {
    condition     = var.amount_usd > 0 && var.amount_usd <= 1000000
    error_message = "amount_usd must be more than 0 and at most 1,000,000."
  }
}

variable "email" {
  description = "Address that AWS Budgets e-mails at 80 % of actual and 100 % of forecast cost."
  type        = string

  validation {
    condition     = can(regex("^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", var.email))
    error_message = "email must be an e-mail address."
  }
}

variable "tag_key" {
  description = "Cost allocation tag the budget filters on (activate it once in the Billing console)."
  type        = string
  default     = "campaign"
}
