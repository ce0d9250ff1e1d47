"""Chapter 9: compiled training, compile modes, dynamic shapes, parallel scheduling."""
