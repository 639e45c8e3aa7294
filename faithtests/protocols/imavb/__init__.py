"""IMAVB (premise rejection, suite 3): does a VLM reject a question whose premise contradicts what it
sees; is the mismatch linearly decodable from its hidden states even when it does not reject it (the
representation–action gap); and does the probe-guided logit adjustment (PGLA) close that gap at a
bounded cost on standard questions? The protocol on one page: README.md beside this file."""
