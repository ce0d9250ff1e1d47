"""Chapter 7 (group) references."""
