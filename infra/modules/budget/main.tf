# A monthly AWS Budgets cost budget over the resources tagged campaign=<name> (every provider of
# the fleet sets that tag by default), e-mailing the operator at 80 % of the actual cost and when
# the forecast reaches 100 %. AWS counts a tag only after it is activated as a cost allocation
# tag (Billing console, once per account); until then the budget sees no cost.

resource "aws_budgets_budget" "campaign" {
  name         = "dnscamp-${var.campaign}"
  budget_type  = "COST"
  limit_amount = format("%.2f", var.amount_usd)
  limit_unit   = "USD"
  time_unit    = "MONTHLY"

  cost_filter {
    name   = "TagKeyValue"
    values = [format("user:%s$%s", var.tag_key, var.campaign)]
  }

  notification {
    comparison_operator        = "GREATER_THAN"
    threshold                  = 80
    threshold_type             = "PERCENTAGE"
    notification_type          = "ACTUAL"
    subscriber_email_addresses = [var.email]
  }

  notification {
    comparison_operator        = "GREATER_THAN"
    threshold                  = 100
    threshold_type             = "PERCENTAGE"
    notification_type          = "FORECASTED"
    subscriber_email_addresses = [var.email]
  }
}
