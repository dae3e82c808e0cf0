"""The cloud fleet as code: Terraform/OpenTofu modules in infra/, driven by `dnscamp fleet`."""
