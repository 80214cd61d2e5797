"""Statistics on scores: do the conditions differ?"""
