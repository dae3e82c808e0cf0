output "name" {
  description = "Name of the budget (AWS Budgets console, `aws budgets describe-budget`)."
  value       = aws_budgets_budget.campaign.name
}

output "limit_usd" {
  description = "The monthly limit in US dollars, as AWS Budgets holds it."
  value       = aws_budgets_budget.campaign.limit_amount
}
