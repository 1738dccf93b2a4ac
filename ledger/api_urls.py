from django.urls import path

from ledger import api, checkpoint_api

urlpatterns = [
    path("stores/", api.StoreListCreateApi.as_view(), name="api-stores"),
    path("stores/<int:store_id>/", api.StoreDetailApi.as_view(), name="api-store"),
    path("stores/<int:store_id>/memories/", api.StoreMemoriesApi.as_view(), name="api-store-memories"),
    path("stores/<int:store_id>/tokens/", api.StoreTokenCreateApi.as_view(), name="api-store-tokens"),
    path("tokens/", api.AgentTokenListApi.as_view(), name="api-tokens"),
    path("tokens/<int:token_id>/revoke/", api.AgentTokenRevokeApi.as_view(), name="api-token-revoke"),
    # Agents POST to these without a trailing slash (DESIGN); a redirect would drop the body,
    # so the slashed spelling is served too.
    path("stores/<int:store_id>/recall", api.RecallApi.as_view(), name="api-store-recall"),
    path("stores/<int:store_id>/recall/", api.RecallApi.as_view(schema=None)),
    path("memories/<int:memory_id>/", api.MemoryDetailApi.as_view(), name="api-memory"),
    path("imports/formats/", api.ImportFormatsApi.as_view(), name="api-import-formats"),
    path("imports/<int:job_id>/", api.ImportJobDetailApi.as_view(), name="api-import"),
    path("receipts/<int:receipt_id>/", api.ReceiptDetailApi.as_view(), name="api-receipt"),
    path("receipts/<int:receipt_id>/outcomes", api.OutcomeCreateApi.as_view(), name="api-receipt-outcomes"),
    path("receipts/<int:receipt_id>/outcomes/", api.OutcomeCreateApi.as_view(schema=None)),
    # Witness-ready checkpoints (C2SP tlog-checkpoint / tlog-cosignature), public by design.
    path("orgs/<slug:org>/checkpoint", checkpoint_api.CheckpointApi.as_view(), name="api-checkpoint"),
    path("orgs/<slug:org>/checkpoint/cosignature", checkpoint_api.CosignatureApi.as_view(),
         name="api-checkpoint-cosignature"),
    path("orgs/<slug:org>/proof/consistency", checkpoint_api.ConsistencyProofApi.as_view(),
         name="api-consistency-proof"),
]
