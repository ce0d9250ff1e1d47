"""Chapter 9 (train) references."""
