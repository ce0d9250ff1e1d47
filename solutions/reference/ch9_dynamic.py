"""Chapter 9 (dynamic) references."""
