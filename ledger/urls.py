from django.urls import path

from ledger import views

urlpatterns = [
    path("stores/", views.store_list, name="store-list"),
    path("stores/<int:store_id>/", views.store_detail, name="store-detail"),
    path("stores/<int:store_id>/import/", views.store_import, name="store-import"),
    path("imports/<int:job_id>/", views.import_detail, name="import-detail"),
    path("imports/<int:job_id>/progress/", views.import_progress, name="import-progress"),
    path("memories/<int:memory_id>/", views.memory_detail, name="memory-detail"),
    path("ledger/", views.ledger_page, name="ledger"),
    path("ledger/verify/", views.ledger_verify, name="ledger-verify"),
    path("ledger/tree-heads/", views.ledger_tree_heads, name="ledger-tree-heads"),
    path("ledger/tree-head/", views.tree_head_issue, name="ledger-tree-head"),
    path("ledger/export/", views.ledger_export, name="ledger-export"),
    path("keys/", views.keys_page, name="keys"),
    path("keys/rotate/", views.keys_rotate, name="keys-rotate"),
    path("keys/receipt-revoke/", views.keys_receipt_revoke, name="keys-receipt-revoke"),
    path("tokens/", views.agent_tokens, name="agent-tokens"),
    path("tokens/<int:token_id>/revoke/", views.agent_token_revoke_view, name="agent-token-revoke"),
    path("keys/witnesses/", views.witness_add, name="witness-add"),
    path("keys/witnesses/<int:witness_id>/revoke/", views.witness_revoke, name="witness-revoke"),
    path("ledger/receipt-check/", views.receipt_check, name="receipt-check"),
]
