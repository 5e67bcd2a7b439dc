"""Beyond one machine: saved machines reached over OpenSSH, and installing cmux on them."""
