# The budget's settings under a mock AWS provider (no credentials, nothing created).

mock_provider "aws" {}

variables {
  campaign   = "www20-ec2"
  amount_usd = 8133.6
  email      = "operator@example.org"
}

run "defaults" {
  command = apply

  assert {
    condition = (aws_budgets_budget.campaign.name == "dnscamp-www20-ec2" && aws_budgets_budget.campaign.budget_type == "COST"
    && aws_budgets_budget.campaign.time_unit == "MONTHLY")
    error_message = "one monthly cost budget named after the campaign"
  }
  assert {
    condition     = aws_budgets_budget.campaign.limit_amount == "8133.60" && aws_budgets_budget.campaign.limit_unit == "USD"
    error_message = "the limit is the amount in dollars, two decimals"
  }
  assert {
    condition     = one(aws_budgets_budget.campaign.cost_filter).name == "TagKeyValue" && one(aws_budgets_budget.campaign.cost_filter).values == tolist(["user:campaign$www20-ec2"])
    error_message = "the budget counts only resources tagged campaign=<name>"
  }
  assert {
    condition = toset([for n in aws_budgets_budget.campaign.notification : "${n.notification_type}/${n.threshold}/${n.threshold_type}/${n.comparison_operator}"]) == toset([
      "ACTUAL/80/PERCENTAGE/GREATER_THAN", "FORECASTED/100/PERCENTAGE/GREATER_THAN",
    ])
    error_message = "80 % of the actual cost and 100 % of the forecast"
  }
  assert {
    condition     = alltrue([for n in aws_budgets_budget.campaign.notification : n.subscriber_email_addresses == toset(["operator@example.org"])])
    error_message = "both notifications go to the operator's address"
  }
  assert {
    condition     = output.name == "dnscamp-www20-ec2" && output.limit_usd == "8133.60"
    error_message = "outputs name the budget and its limit"
  }
}

run "not_an_email" {
  command = plan
  variables {
    email = "operator at example.org"
  }
  expect_failures = [var.email]
}

run "no_free_budget" {
  command = plan
  variables {
    amount_usd = 0
  }
  expect_failures = [var.amount_usd]
}
