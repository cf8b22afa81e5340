/* The part of UCX's UCP API that the UCX transport calls, declared from
 * UCX's public API (ucp/api/ucp.h, ucp_def.h, ucs/type/status.h of UCX
 * 1.13, API 1.13), so gpubridge builds without UCX's headers and loads the
 * library with dlopen where it runs. Every parameter struct is declared in
 * full (UCX reads only the fields its field_mask names, but the layout must
 * be UCX's); tests/unit/test_net_ucx_api.c checks each size, offset and
 * constant against the real headers where they are installed. */
#ifndef GB_NET_UCX_API_H
#define GB_NET_UCX_API_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The API these declarations follow, passed to ucp_init_version. */
#define GB_UCP_API_MAJOR 1
#define GB_UCP_API_MINOR 13
/* The oldest library with every *_nbx call used here. */
#define GB_UCP_MIN_MAJOR 1
#define GB_UCP_MIN_MINOR 10

typedef int ucs_status_t; /* an enum in UCX: int-sized */
typedef void* ucs_status_ptr_t;
typedef uint64_t ucp_tag_t;
typedef uint64_t ucp_datatype_t;
typedef struct ucp_context* ucp_context_h;
typedef struct ucp_config ucp_config_t;
typedef struct ucp_worker* ucp_worker_h;
typedef struct ucp_ep* ucp_ep_h;
typedef struct ucp_address ucp_address_t;
typedef struct ucp_conn_request* ucp_conn_request_h;
typedef struct ucp_mem* ucp_mem_h;

enum {
  GB_UCS_OK = 0,
  GB_UCS_INPROGRESS = 1,
  GB_UCS_ERR_NO_RESOURCE = -2,
  GB_UCS_ERR_NO_MEMORY = -4,
  GB_UCS_ERR_INVALID_PARAM = -5,
  GB_UCS_ERR_UNREACHABLE = -6,
  GB_UCS_ERR_MESSAGE_TRUNCATED = -9,
  GB_UCS_ERR_NO_DEVICE = -14,
  GB_UCS_ERR_BUSY = -15,
  GB_UCS_ERR_CANCELED = -16,
  GB_UCS_ERR_TIMED_OUT = -20,
  GB_UCS_ERR_EXCEEDS_LIMIT = -21,
  GB_UCS_ERR_UNSUPPORTED = -22,
  GB_UCS_ERR_REJECTED = -23,
  GB_UCS_ERR_NOT_CONNECTED = -24,
  GB_UCS_ERR_CONNECTION_RESET = -25,
  GB_UCS_ERR_FIRST_LINK_FAILURE = -40,
  GB_UCS_ERR_LAST_ENDPOINT_FAILURE = -89,
  GB_UCS_ERR_LAST = -100
};
/* UCS_PTR_IS_ERR / UCS_PTR_STATUS of a returned request pointer. */
#define GB_UCS_PTR_IS_ERR(p) ((uintptr_t)(p) >= (uintptr_t)GB_UCS_ERR_LAST)
#define GB_UCS_PTR_STATUS(p) ((ucs_status_t)(intptr_t)(p))

enum { GB_UCS_THREAD_MODE_SINGLE = 0, GB_UCS_THREAD_MODE_SERIALIZED = 1, GB_UCS_THREAD_MODE_MULTI = 2 };
enum { GB_UCP_ERR_HANDLING_MODE_NONE = 0, GB_UCP_ERR_HANDLING_MODE_PEER = 1 };

#define GB_UCS_BIT(i) (1ull << (i))
#define GB_UCP_PARAM_FIELD_FEATURES GB_UCS_BIT(0)
#define GB_UCP_PARAM_FIELD_MT_WORKERS_SHARED GB_UCS_BIT(5)
#define GB_UCP_FEATURE_TAG GB_UCS_BIT(0)
#define GB_UCP_WORKER_PARAM_FIELD_THREAD_MODE GB_UCS_BIT(0)
#define GB_UCP_WORKER_ATTR_FIELD_THREAD_MODE GB_UCS_BIT(0)
#define GB_UCP_WORKER_ATTR_FIELD_ADDRESS GB_UCS_BIT(1)
#define GB_UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS GB_UCS_BIT(2)
#define GB_UCP_WORKER_ADDRESS_FLAG_NET_ONLY GB_UCS_BIT(0)
#define GB_UCP_EP_PARAM_FIELD_REMOTE_ADDRESS GB_UCS_BIT(0)
#define GB_UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE GB_UCS_BIT(1)
#define GB_UCP_EP_PARAM_FIELD_ERR_HANDLER GB_UCS_BIT(2)
#define GB_UCP_OP_ATTR_FIELD_CALLBACK GB_UCS_BIT(1)
#define GB_UCP_OP_ATTR_FIELD_USER_DATA GB_UCS_BIT(2)
#define GB_UCP_OP_ATTR_FIELD_FLAGS GB_UCS_BIT(4)
#define GB_UCP_OP_ATTR_FIELD_RECV_INFO GB_UCS_BIT(7)
#define GB_UCP_OP_ATTR_FIELD_MEMH GB_UCS_BIT(8)
#define GB_UCP_MEM_MAP_PARAM_FIELD_ADDRESS GB_UCS_BIT(0)
#define GB_UCP_MEM_MAP_PARAM_FIELD_LENGTH GB_UCS_BIT(1)
#define GB_UCP_EP_CLOSE_FLAG_FORCE GB_UCS_BIT(0)
#define GB_UCP_ENTITY_NAME_MAX 32

typedef void (*ucp_request_init_callback_t)(void* request);
typedef void (*ucp_request_cleanup_callback_t)(void* request);
typedef void (*ucp_err_handler_cb_t)(void* arg, ucp_ep_h ep, ucs_status_t status);
typedef void (*ucp_send_nbx_callback_t)(void* request, ucs_status_t status, void* user_data);
typedef struct ucp_tag_recv_info {
  ucp_tag_t sender_tag;
  size_t length;
} ucp_tag_recv_info_t;
typedef void (*ucp_tag_recv_nbx_callback_t)(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                                            void* user_data);

typedef struct ucp_params {
  uint64_t field_mask;
  uint64_t features;
  size_t request_size;
  ucp_request_init_callback_t request_init;
  ucp_request_cleanup_callback_t request_cleanup;
  uint64_t tag_sender_mask;
  int mt_workers_shared;
  size_t estimated_num_eps;
  size_t estimated_num_ppn;
  const char* name;
} ucp_params_t;

typedef struct {
  unsigned long bits[1024 / (8 * sizeof(unsigned long))];
} gb_ucs_cpu_set_t;

typedef struct ucp_worker_params {
  uint64_t field_mask;
  int thread_mode;
  gb_ucs_cpu_set_t cpu_mask;
  unsigned events;
  void* user_data;
  int event_fd;
  uint64_t flags;
  const char* name;
  size_t am_alignment;
  uint64_t client_id;
} ucp_worker_params_t;

typedef struct ucp_worker_attr {
  uint64_t field_mask;
  int thread_mode;
  uint32_t address_flags;
  ucp_address_t* address;
  size_t address_length;
  size_t max_am_header;
  char name[GB_UCP_ENTITY_NAME_MAX];
  size_t max_debug_string;
} ucp_worker_attr_t;

typedef struct ucp_err_handler {
  ucp_err_handler_cb_t cb;
  void* arg;
} ucp_err_handler_t;

typedef struct {
  const struct sockaddr* addr;
  socklen_t addrlen;
} gb_ucs_sock_addr_t;

typedef struct ucp_ep_params {
  uint64_t field_mask;
  const ucp_address_t* address;
  int err_mode;
  ucp_err_handler_t err_handler;
  void* user_data;
  unsigned flags;
  gb_ucs_sock_addr_t sockaddr;
  ucp_conn_request_h conn_request;
  const char* name;
  gb_ucs_sock_addr_t local_sockaddr;
} ucp_ep_params_t;

typedef struct {
  uint32_t op_attr_mask;
  uint32_t flags;
  void* request;
  union {
    ucp_send_nbx_callback_t send;
    ucp_tag_recv_nbx_callback_t recv;
    void* other; /* UCX's stream and active-message callbacks: pointers too */
  } cb;
  ucp_datatype_t datatype;
  void* user_data;
  void* reply_buffer;
  int memory_type;
  union {
    size_t* length;
    ucp_tag_recv_info_t* tag_info;
  } recv_info;
  ucp_mem_h memh;
} ucp_request_param_t;

typedef struct ucp_mem_map_params {
  uint64_t field_mask;
  void* address;
  size_t length;
  unsigned flags;
  unsigned prot;
  int memory_type;
} ucp_mem_map_params_t;

/* The entry points, bound by load.c. */
typedef struct {
  void (*ucp_get_version)(unsigned* major, unsigned* minor, unsigned* release);
  ucs_status_t (*ucp_config_read)(const char* envPrefix, const char* filename, ucp_config_t** config);
  ucs_status_t (*ucp_config_modify)(ucp_config_t* config, const char* name, const char* value);
  void (*ucp_config_release)(ucp_config_t* config);
  ucs_status_t (*ucp_init_version)(unsigned apiMajor, unsigned apiMinor, const ucp_params_t* params,
                                   const ucp_config_t* config, ucp_context_h* context);
  void (*ucp_cleanup)(ucp_context_h context);
  ucs_status_t (*ucp_worker_create)(ucp_context_h context, const ucp_worker_params_t* params, ucp_worker_h* worker);
  void (*ucp_worker_destroy)(ucp_worker_h worker);
  ucs_status_t (*ucp_worker_query)(ucp_worker_h worker, ucp_worker_attr_t* attr);
  void (*ucp_worker_release_address)(ucp_worker_h worker, ucp_address_t* address);
  unsigned (*ucp_worker_progress)(ucp_worker_h worker);
  ucs_status_t (*ucp_ep_create)(ucp_worker_h worker, const ucp_ep_params_t* params, ucp_ep_h* ep);
  ucs_status_ptr_t (*ucp_ep_close_nbx)(ucp_ep_h ep, const ucp_request_param_t* param);
  ucs_status_ptr_t (*ucp_tag_send_nbx)(ucp_ep_h ep, const void* buffer, size_t count, ucp_tag_t tag,
                                       const ucp_request_param_t* param);
  ucs_status_ptr_t (*ucp_tag_recv_nbx)(ucp_worker_h worker, void* buffer, size_t count, ucp_tag_t tag,
                                       ucp_tag_t tagMask, const ucp_request_param_t* param);
  ucs_status_t (*ucp_request_check_status)(void* request);
  void (*ucp_request_cancel)(ucp_worker_h worker, void* request);
  void (*ucp_request_free)(void* request);
  ucs_status_t (*ucp_mem_map)(ucp_context_h context, const ucp_mem_map_params_t* params, ucp_mem_h* memh);
  ucs_status_t (*ucp_mem_unmap)(ucp_context_h context, ucp_mem_h memh);
  const char* (*ucs_status_string)(ucs_status_t status);
} gbUcpApi_t;

#endif
