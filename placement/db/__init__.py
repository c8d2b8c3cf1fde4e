"""Database: tables, engine and transactions, migrations."""
