"""The core every chapter shares: dtypes, errors, the op registry and the Tensor."""
