from orgs.selectors import organization_list_for_user


def organization(request) -> dict:
    user = getattr(request, "user", None)
    orgs = organization_list_for_user(user=user) if user is not None and user.is_authenticated else []
    return {
        "current_organization": getattr(request, "organization", None),
        "current_membership": getattr(request, "membership", None),
        "user_organizations": orgs,
    }
