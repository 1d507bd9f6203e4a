"""drill"""
