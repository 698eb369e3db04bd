"""Database layer: schema, migrations, row mapping and SQL."""
