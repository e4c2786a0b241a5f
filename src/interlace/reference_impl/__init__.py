"""reference_impl"""
