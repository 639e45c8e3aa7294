"""faithtests."""
