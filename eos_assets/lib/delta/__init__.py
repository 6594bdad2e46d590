"""Delta tables: reads, commits, file statistics, maintenance, and every txn app id the product
writes.
"""
