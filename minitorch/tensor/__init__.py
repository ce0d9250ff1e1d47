"""Chapter 1: storage, strides, views, broadcasting and the strided loops."""
