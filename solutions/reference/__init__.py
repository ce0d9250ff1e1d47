"""One module per chapter, ``chC.py``, with the reference of every exercise ``C.N`` under the stub's name."""
