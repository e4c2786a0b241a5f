"""linters/rules"""
