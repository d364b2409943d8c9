"""Search tests share tests/conftest.py's fixtures: the sample catalog, its session index and
``small_csv``."""
