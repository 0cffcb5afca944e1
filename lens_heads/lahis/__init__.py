"""lahis"""
