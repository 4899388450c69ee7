"""Helpers more than one test folder shares (tests/conftest.py holds the fixtures and the basics every folder
uses). Each module's checks take what they run against (a URL, a server, a pool), so the same check runs on the
simulated engine (tests/kgserve) and on a real KataGo (tests/katago). No test module imports another."""
