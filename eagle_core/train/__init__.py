"""Training pipeline for the default target's EAGLE head: gen -> vocab -> train -> eval."""
