"""What runs on a vantage point: measurements (ping, dns, pageload), records, spool."""
