"""A catalogue of port bugs and the adapter that serves a Python port with one of them planted."""
