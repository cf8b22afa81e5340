/* What test_net_ucx_api compares between src/net/ucx/api.h and UCX's own
 * headers: every struct the transport passes to UCX, field by field, and
 * every constant. Included by ours.c and theirs.c after their headers. */
#define GB_UCX_STRUCTS(X) \
  X(ucp_params_t) X(ucp_worker_params_t) X(ucp_worker_attr_t) X(ucp_err_handler_t) X(ucp_ep_params_t) \
  X(ucp_request_param_t) X(ucp_tag_recv_info_t) X(ucp_mem_map_params_t)

#define GB_UCX_FIELDS(X)                                                                                       \
  X(ucp_params_t, field_mask) X(ucp_params_t, features) X(ucp_params_t, request_size)                         \
  X(ucp_params_t, request_init) X(ucp_params_t, request_cleanup) X(ucp_params_t, tag_sender_mask)             \
  X(ucp_params_t, mt_workers_shared) X(ucp_params_t, estimated_num_eps) X(ucp_params_t, estimated_num_ppn)    \
  X(ucp_params_t, name)                                                                                        \
  X(ucp_worker_params_t, field_mask) X(ucp_worker_params_t, thread_mode) X(ucp_worker_params_t, cpu_mask)     \
  X(ucp_worker_params_t, events) X(ucp_worker_params_t, user_data) X(ucp_worker_params_t, event_fd)           \
  X(ucp_worker_params_t, flags) X(ucp_worker_params_t, name) X(ucp_worker_params_t, am_alignment)             \
  X(ucp_worker_params_t, client_id)                                                                            \
  X(ucp_worker_attr_t, field_mask) X(ucp_worker_attr_t, thread_mode) X(ucp_worker_attr_t, address_flags)      \
  X(ucp_worker_attr_t, address) X(ucp_worker_attr_t, address_length) X(ucp_worker_attr_t, max_am_header)      \
  X(ucp_worker_attr_t, name) X(ucp_worker_attr_t, max_debug_string)                                           \
  X(ucp_err_handler_t, cb) X(ucp_err_handler_t, arg)                                                           \
  X(ucp_ep_params_t, field_mask) X(ucp_ep_params_t, address) X(ucp_ep_params_t, err_mode)                     \
  X(ucp_ep_params_t, err_handler) X(ucp_ep_params_t, user_data) X(ucp_ep_params_t, flags)                     \
  X(ucp_ep_params_t, sockaddr) X(ucp_ep_params_t, conn_request) X(ucp_ep_params_t, name)                      \
  X(ucp_ep_params_t, local_sockaddr)                                                                           \
  X(ucp_request_param_t, op_attr_mask) X(ucp_request_param_t, flags) X(ucp_request_param_t, request)          \
  X(ucp_request_param_t, cb) X(ucp_request_param_t, datatype) X(ucp_request_param_t, user_data)               \
  X(ucp_request_param_t, reply_buffer) X(ucp_request_param_t, memory_type) X(ucp_request_param_t, recv_info)  \
  X(ucp_request_param_t, memh)                                                                                 \
  X(ucp_tag_recv_info_t, sender_tag) X(ucp_tag_recv_info_t, length)                                           \
  X(ucp_mem_map_params_t, field_mask) X(ucp_mem_map_params_t, address) X(ucp_mem_map_params_t, length)         \
  X(ucp_mem_map_params_t, flags) X(ucp_mem_map_params_t, prot) X(ucp_mem_map_params_t, memory_type)

/* (ours, UCX's) */
#define GB_UCX_CONSTANTS(X)                                                                                     \
  X(GB_UCP_API_MAJOR, UCP_API_MAJOR) X(GB_UCP_API_MINOR, UCP_API_MINOR)                                         \
  X(GB_UCS_OK, UCS_OK) X(GB_UCS_INPROGRESS, UCS_INPROGRESS) X(GB_UCS_ERR_NO_RESOURCE, UCS_ERR_NO_RESOURCE)      \
  X(GB_UCS_ERR_NO_MEMORY, UCS_ERR_NO_MEMORY) X(GB_UCS_ERR_INVALID_PARAM, UCS_ERR_INVALID_PARAM)                 \
  X(GB_UCS_ERR_UNREACHABLE, UCS_ERR_UNREACHABLE) X(GB_UCS_ERR_MESSAGE_TRUNCATED, UCS_ERR_MESSAGE_TRUNCATED)     \
  X(GB_UCS_ERR_NO_DEVICE, UCS_ERR_NO_DEVICE) X(GB_UCS_ERR_BUSY, UCS_ERR_BUSY)                                   \
  X(GB_UCS_ERR_CANCELED, UCS_ERR_CANCELED) X(GB_UCS_ERR_TIMED_OUT, UCS_ERR_TIMED_OUT)                           \
  X(GB_UCS_ERR_EXCEEDS_LIMIT, UCS_ERR_EXCEEDS_LIMIT) X(GB_UCS_ERR_UNSUPPORTED, UCS_ERR_UNSUPPORTED)             \
  X(GB_UCS_ERR_REJECTED, UCS_ERR_REJECTED) X(GB_UCS_ERR_NOT_CONNECTED, UCS_ERR_NOT_CONNECTED)                   \
  X(GB_UCS_ERR_CONNECTION_RESET, UCS_ERR_CONNECTION_RESET)                                                      \
  X(GB_UCS_ERR_FIRST_LINK_FAILURE, UCS_ERR_FIRST_LINK_FAILURE)                                                  \
  X(GB_UCS_ERR_LAST_ENDPOINT_FAILURE, UCS_ERR_LAST_ENDPOINT_FAILURE) X(GB_UCS_ERR_LAST, UCS_ERR_LAST)           \
  X(GB_UCS_THREAD_MODE_SINGLE, UCS_THREAD_MODE_SINGLE) X(GB_UCS_THREAD_MODE_SERIALIZED, UCS_THREAD_MODE_SERIALIZED) \
  X(GB_UCS_THREAD_MODE_MULTI, UCS_THREAD_MODE_MULTI)                                                            \
  X(GB_UCP_ERR_HANDLING_MODE_NONE, UCP_ERR_HANDLING_MODE_NONE) X(GB_UCP_ERR_HANDLING_MODE_PEER, UCP_ERR_HANDLING_MODE_PEER) \
  X(GB_UCP_PARAM_FIELD_FEATURES, UCP_PARAM_FIELD_FEATURES)                                                      \
  X(GB_UCP_PARAM_FIELD_MT_WORKERS_SHARED, UCP_PARAM_FIELD_MT_WORKERS_SHARED)                                    \
  X(GB_UCP_FEATURE_TAG, UCP_FEATURE_TAG)                           \
  X(GB_UCP_WORKER_PARAM_FIELD_THREAD_MODE, UCP_WORKER_PARAM_FIELD_THREAD_MODE)                                  \
  X(GB_UCP_WORKER_ATTR_FIELD_THREAD_MODE, UCP_WORKER_ATTR_FIELD_THREAD_MODE)                                    \
  X(GB_UCP_WORKER_ATTR_FIELD_ADDRESS, UCP_WORKER_ATTR_FIELD_ADDRESS)                                            \
  X(GB_UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS, UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS)                                \
  X(GB_UCP_WORKER_ADDRESS_FLAG_NET_ONLY, UCP_WORKER_ADDRESS_FLAG_NET_ONLY)                                      \
  X(GB_UCP_EP_PARAM_FIELD_REMOTE_ADDRESS, UCP_EP_PARAM_FIELD_REMOTE_ADDRESS)                                    \
  X(GB_UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE, UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE)                              \
  X(GB_UCP_EP_PARAM_FIELD_ERR_HANDLER, UCP_EP_PARAM_FIELD_ERR_HANDLER)                                          \
  X(GB_UCP_OP_ATTR_FIELD_CALLBACK, UCP_OP_ATTR_FIELD_CALLBACK)                                                  \
  X(GB_UCP_OP_ATTR_FIELD_USER_DATA, UCP_OP_ATTR_FIELD_USER_DATA)                                                \
  X(GB_UCP_OP_ATTR_FIELD_FLAGS, UCP_OP_ATTR_FIELD_FLAGS)                                                        \
  X(GB_UCP_OP_ATTR_FIELD_RECV_INFO, UCP_OP_ATTR_FIELD_RECV_INFO)                                                \
  X(GB_UCP_OP_ATTR_FIELD_MEMH, UCP_OP_ATTR_FIELD_MEMH)                                                          \
  X(GB_UCP_MEM_MAP_PARAM_FIELD_ADDRESS, UCP_MEM_MAP_PARAM_FIELD_ADDRESS)                                        \
  X(GB_UCP_MEM_MAP_PARAM_FIELD_LENGTH, UCP_MEM_MAP_PARAM_FIELD_LENGTH)                                          \
  X(GB_UCP_EP_CLOSE_FLAG_FORCE, UCP_EP_CLOSE_FLAG_FORCE) X(GB_UCP_ENTITY_NAME_MAX, UCP_ENTITY_NAME_MAX)

typedef struct {
  const char* name;
  long long offset, size;
} gbUcxLayout_t;
