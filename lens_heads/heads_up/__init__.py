"""heads_up"""
