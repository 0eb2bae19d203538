"""Shared set-up of the Python tests.

The tests that are not about security run every program plaintext on
loopback, and say so explicitly (proto/security.md: VBT_INSECURE=1 is
--insecure); test_security.py gives keys instead and clears it.
"""
import os

os.environ.setdefault("VBT_INSECURE", "1")
