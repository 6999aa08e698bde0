from governance.navigation import NavItem

ITEMS = [NavItem("Traces", "Utility audits", "audit:list", order=47)]
