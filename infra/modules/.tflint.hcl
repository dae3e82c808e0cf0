# tflint for the modules: every rule of the bundled terraform ruleset (the AWS ruleset is a
# plugin downloaded from GitHub releases, which this project cannot reach).
config {
  call_module_type = "none"
}

plugin "terraform" {
  enabled = true
  preset  = "all"
}
