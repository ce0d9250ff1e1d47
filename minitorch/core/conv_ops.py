"""Chapter 3's op set: convolution, pooling, softmax and logsumexp (registered for every backend)."""
