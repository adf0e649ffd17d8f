// The slice of NCCL 2.x's C ABI the addon uses, declared here because the addon neither builds
// nor links against NCCL: libnccl.so.2 is opened at run time (addon/nccl.cpp), so a machine
// without it still loads the addon. These match nccl.h of every 2.x release (ncclSend/ncclRecv
// since 2.7): enums are int-sized there, so plain ints pass identically.
//
// The functions are declared only for their types (decltype of each gives the pointer type
// dlsym's result is cast to). Nothing may call or take the address of them directly: that would
// leave an undefined symbol in memra.node and break loading it where NCCL is absent.
#pragma once

#include <cuda_runtime_api.h>

#include <stddef.h>

extern "C" {

typedef struct ncclComm* ncclComm_t;

#define MEMRA_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[MEMRA_NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef int ncclResult_t;
enum : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};

typedef int ncclDataType_t;
enum : int { ncclFloat32 = 7 };

typedef int ncclRedOp_t;
enum : int { ncclSum = 0 };

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
const char* ncclGetErrorString(ncclResult_t result);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

}  // extern "C"
