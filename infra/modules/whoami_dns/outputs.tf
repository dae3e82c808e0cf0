output "public_ip" {
  description = "Elastic IP of the server: the address of ns.<zone> to delegate the zone to."
  value       = aws_eip.dns.public_ip
}

output "instance_id" {
  description = "Id of the DNS server instance."
  value       = aws_instance.dns.id
}

output "corefile" {
  description = "The CoreDNS config the server runs."
  value       = local.corefile
}

output "user_data" {
  description = "The cloud-config the server boots with (tests validate it with cloud-init schema)."
  value       = local.user_data
  sensitive   = true
}
